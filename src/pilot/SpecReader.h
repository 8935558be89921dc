// Typed, located access to a YAML spec for the spec parser: every failure is a user error
// "FILE:LINE:COL: error: <what>; <fix>" pointing at the offending node.
#pragma once
#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace tp::pilot {

/// The known key closest to `key` by edit distance, or "" when none is close.
std::string closest_key(const std::string& key, const std::vector<std::string>& known);

class SpecReader {
public:
  explicit SpecReader(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const YAML::Mark& at, const std::string& what,
                         const std::string& fix) const;
  [[noreturn]] void fail(const YAML::Node& at, const std::string& what,
                         const std::string& fix) const {
    fail(at.Mark(), what, fix);
  }

  /// `n` must be a map whose keys are all in `known` (each once); `where` names it ("tolerance").
  void check_map(const YAML::Node& n, const std::vector<std::string>& known,
                 const std::string& where, const std::string& example) const;
  /// map[key], or a "missing" error at the map naming `example` as the fix.
  YAML::Node require(const YAML::Node& map, const std::string& key, const std::string& where,
                     const std::string& example) const;

  std::string string(const YAML::Node& n, const std::string& what,
                     const std::string& example) const;
  double number(const YAML::Node& n, const std::string& what, const std::string& example) const;
  int64_t integer(const YAML::Node& n, const std::string& what, const std::string& example) const;
  std::vector<YAML::Node> list(const YAML::Node& n, const std::string& what,
                               const std::string& example) const;

  /// Column and line of a node, 1-based (yaml-cpp counts from 0).
  static int line(const YAML::Node& n) { return n.Mark().line + 1; }
  static int column(const YAML::Node& n) { return n.Mark().column + 1; }

private:
  std::string file_;
};

} // namespace tp::pilot
