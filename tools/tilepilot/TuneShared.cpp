#include "TuneShared.h"

#include "autotune/Policy.h"

namespace tp::cli {

using namespace tp::autotune;

std::string store_winner(const ops::Problem& p, const rt::DeviceInfo& device, const TuneResult& r,
                         const ops::Config& dflt, const std::string& source) {
  const DbEntry e = winner_entry(make_key(p, device), r, dflt, source);
  TuningDb db(TuningDb::default_dir());
  db.put(e);
  return db.path_for(e.key);
}

} // namespace tp::cli
