// Errors. A UserError is bad input (an invalid kernel, a malformed spec, a wrong tensor at
// launch) and carries the builder's source location where there is one; an InternalError is a
// TilePilot bug and says so. Both are thrown by streaming a message into an ErrorReport:
//   user_error(loc) << "copy: shape mismatch ...";
#pragma once
#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tp {

/// Where in the user's C++ a kernel statement was built. Not part of the canonical IR text.
struct SourceLoc {
  std::string file;
  int line = 0;
  static SourceLoc here(std::source_location l = std::source_location::current()) {
    return {l.file_name(), static_cast<int>(l.line())};
  }
  bool known() const { return line > 0; }
  std::string str() const; // "file.cpp:12", or "" when unknown
};

class Error : public std::runtime_error {
public:
  enum class Kind { user, internal };
  Error(Kind kind, SourceLoc loc, const std::string& what)
      : std::runtime_error(what), kind_(kind), loc_(std::move(loc)) {}
  Kind kind() const { return kind_; }
  const SourceLoc& loc() const { return loc_; }

private:
  Kind kind_;
  SourceLoc loc_;
};

class UserError : public Error {
public:
  UserError(SourceLoc loc, const std::string& what) : Error(Kind::user, std::move(loc), what) {}
};

class InternalError : public Error {
public:
  InternalError(SourceLoc loc, const std::string& what)
      : Error(Kind::internal, std::move(loc), what) {}
};

/// Collects a message and throws when the full expression ends.
class ErrorReport {
public:
  ErrorReport(Error::Kind kind, SourceLoc loc);
  ErrorReport(const ErrorReport&) = delete;
  ~ErrorReport() noexcept(false);
  template <typename T>
  ErrorReport& operator<<(const T& v) {
    msg_ << v;
    return *this;
  }

private:
  Error::Kind kind_;
  SourceLoc loc_;
  std::ostringstream msg_;
  int uncaught_;
};

inline ErrorReport user_error(SourceLoc loc = {}) {
  return {Error::Kind::user, std::move(loc)};
}

} // namespace tp

#define TILEPILOT_INTERNAL_ERROR                                                                   \
  ::tp::ErrorReport(::tp::Error::Kind::internal, ::tp::SourceLoc{__FILE__, __LINE__})

/// Asserts an invariant of TilePilot itself; a failure is reported as an internal error.
#define internal_assert(c)                                                                         \
  if (!(c)) TILEPILOT_INTERNAL_ERROR << "Condition failed: " #c ": "
