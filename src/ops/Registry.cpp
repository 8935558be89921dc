// The operator registry: built-in operators first, then plug-ins in load order. Lookups take a
// lock so that a plug-in loaded from one thread never races a lookup in another; registered
// operators are never removed, so the references handed out stay valid.
#include <mutex>

#include "ops/Builtins.h"
#include "tilepilot/error.h"

namespace tp::ops {

namespace {

struct Entry {
  std::shared_ptr<const Operator> op;
  std::string origin;
};

struct Registry {
  std::mutex mu;
  std::vector<Entry> entries;
  Registry() {
    for (auto& op : builtin_operators())
      entries.push_back({std::move(op), "built-in"});
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

} // namespace

void register_operator(std::shared_ptr<const Operator> op, const std::string& origin) {
  internal_assert(op != nullptr) << "register_operator: null operator";
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  const std::string name = op->name();
  if (name.empty() || name.find_first_of(" ,=|/\\\t\n") != std::string::npos)
    user_error() << "operator name '" << name << "' from " << origin
                 << " is not a plain word; use letters, digits, '_' or '-'";
  for (const Entry& e : r.entries)
    if (e.op->name() == name)
      user_error() << "two operators are named '" << name << "': one is " << e.origin
                   << ", the other " << (origin.empty() ? "registered by the program" : origin)
                   << "; rename one of them";
  r.entries.push_back({std::move(op), origin.empty() ? "registered by the program" : origin});
}

const Operator& find_operator(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  for (const Entry& e : r.entries)
    if (e.op->name() == name) return *e.op;
  std::string known;
  for (const Entry& e : r.entries)
    known += (known.empty() ? "" : ", ") + e.op->name();
  user_error() << "unknown operator '" << name << "'; known operators: " << known
               << " (a plug-in's operators need --plugin PATH.so or $TILEPILOT_PLUGINS)";
  std::abort();
}

std::vector<const Operator*> all_operators() {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  std::vector<const Operator*> out;
  for (const Entry& e : r.entries)
    out.push_back(e.op.get());
  return out;
}

std::string operator_origin(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  for (const Entry& e : r.entries)
    if (e.op->name() == name) return e.origin;
  return "";
}

} // namespace tp::ops
