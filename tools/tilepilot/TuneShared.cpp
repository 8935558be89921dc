#include "TuneShared.h"

#include "autotune/ConfigSpace.h"
#include "autotune/TuneKey.h"
#include "autotune/TuningDb.h"

namespace tp::cli {

using namespace tp::autotune;

double default_ms_in_log(const TuneResult& r, const ops::Config& dflt) {
  double ms = -1;
  for (const CandidateLog& c : r.log)
    if (is_default_config(c.config, dflt) && c.median_ms >= 0) ms = c.median_ms;
  return ms;
}

std::string store_winner(const ops::Problem& p, const rt::DeviceInfo& device, const TuneResult& r,
                         double default_ms, const std::string& source) {
  DbEntry e;
  e.key = make_key(p, device);
  e.config = r.best;
  e.ms_median = r.best_measurement.median_ms();
  e.default_ms_median = default_ms;
  e.source = source;
  e.extra = {{"wall_s", r.wall_s}, {"status_counts", r.status_counts()}};
  TuningDb db(TuningDb::default_dir());
  db.put(e);
  return db.path_for(e.key);
}

} // namespace tp::cli
