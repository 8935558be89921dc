// The message of the UserError a call raises ("" when it raises none): for tests that check
// what a user is told.
#pragma once
#include <functional>
#include <string>

#include "tilepilot/error.h"

namespace tp::test {

inline std::string user_error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

} // namespace tp::test
