// ErrorReport: throws the collected message when the reporting expression ends.
#include <exception>

#include "tilepilot/error.h"

namespace tp {

std::string SourceLoc::str() const {
  if (!known()) return "";
  std::string f = file;
  if (auto p = f.rfind('/'); p != std::string::npos) {
    // Keep the last two path components: enough to find the file, short enough to read.
    auto q = f.rfind('/', p - 1);
    if (q != std::string::npos) f = f.substr(q + 1);
  }
  return f + ":" + std::to_string(line);
}

ErrorReport::ErrorReport(Error::Kind kind, SourceLoc loc)
    : kind_(kind), loc_(std::move(loc)), uncaught_(std::uncaught_exceptions()) {}

ErrorReport::~ErrorReport() noexcept(false) {
  if (std::uncaught_exceptions() > uncaught_) return; // already unwinding: don't terminate
  std::string where = loc_.known() ? loc_.str() + ": " : std::string();
  if (kind_ == Error::Kind::internal)
    throw InternalError(loc_, "internal error (a TilePilot bug, please report it): " + where +
                                  msg_.str());
  throw UserError(loc_, where + "error: " + msg_.str());
}

} // namespace tp
