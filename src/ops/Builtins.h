// The built-in operators, registered before any plug-in. Each line names one folder under
// src/ops/: adding an operator is that folder and one line here.
#pragma once
#include <memory>
#include <vector>

#include "tilepilot/operator.h"

namespace tp::ops {

std::vector<std::shared_ptr<const Operator>> builtin_operators();

} // namespace tp::ops
