// Parses ptxas -v lines. The format, as printed by ptxas 12.x/13.x for each entry:
//   ptxas info    : Compiling entry function 'k' for 'sm_90a'
//   ptxas info    : Function properties for k
//   ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem, 364 bytes cmem[0]
// Each number is matched on its own ("N bytes spill stores"), so the order of the fields and
// the presence of extra ones (cumulative stack size, cmem) do not matter.
#include "runtime/ResourceUsage.h"

#include <regex>
#include <sstream>

namespace tp::rt {

namespace {

bool find_int(const std::string& line, const std::regex& re, int* out) {
  std::smatch m;
  if (!std::regex_search(line, m, re)) return false;
  *out = std::stoi(m[1].str());
  return true;
}

/// Name between the first pair of single quotes after `marker`, or "".
std::string quoted_after(const std::string& line, const std::string& marker) {
  auto p = line.find(marker);
  if (p == std::string::npos) return "";
  auto a = line.find('\'', p + marker.size());
  auto b = a == std::string::npos ? a : line.find('\'', a + 1);
  return b == std::string::npos ? "" : line.substr(a + 1, b - a - 1);
}

} // namespace

std::vector<std::pair<std::string, ResourceUsage>> parse_resource_usage(const std::string& log) {
  static const std::regex registers(R"((\d+) registers)"), barriers(R"(used (\d+) barriers)"),
      smem(R"((\d+) bytes smem)"), stack(R"((\d+) bytes stack frame)"),
      spill_st(R"((\d+) bytes spill stores)"), spill_ld(R"((\d+) bytes spill loads)");
  std::vector<std::pair<std::string, ResourceUsage>> out;
  ResourceUsage* cur = nullptr;
  std::string cur_name;
  bool props_of_other = false; // inside "Function properties" of a non-entry device function
  std::vector<std::pair<std::string, std::string>> serialized; // function, ptxas line
  std::vector<std::string> injected;                           // function, per injected fence
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ptxas", 0) != 0) continue;
    // Printed before the entry's "Compiling entry function" line, naming the function.
    if (line.find("wgmma.mma_async instructions are serialized") != std::string::npos) {
      // C7515 (accumulator defined mid-pipeline) says "in the function", C7512 (too few
      // registers) "for the function".
      serialized.emplace_back(quoted_after(line, "the function"), line);
      continue;
    }
    if (line.find("warpgroup.arrive is injected") != std::string::npos) {
      injected.push_back(quoted_after(line, "in function"));
      continue;
    }
    if (std::string e = quoted_after(line, "Compiling entry function"); !e.empty()) {
      out.emplace_back(e, ResourceUsage{});
      cur = &out.back().second;
      cur_name = e;
      props_of_other = false;
    } else if (auto p = line.find("Function properties for "); p != std::string::npos) {
      std::string fn = line.substr(p + 24);
      while (!fn.empty() && (fn.back() == ' ' || fn.back() == '\r'))
        fn.pop_back();
      props_of_other = fn != cur_name;
    }
    if (!cur || props_of_other) continue;
    if (line.find("Compile time") != std::string::npos) continue;
    cur->raw += line + "\n";
    find_int(line, registers, &cur->registers);
    find_int(line, barriers, &cur->barriers);
    find_int(line, smem, &cur->shared_static_bytes);
    find_int(line, stack, &cur->stack_bytes);
    find_int(line, spill_st, &cur->spill_store_bytes);
    find_int(line, spill_ld, &cur->spill_load_bytes);
  }
  for (const std::string& fn : injected)
    for (auto& [name, usage] : out)
      if (name == fn) ++usage.wgmma_fences_injected;
  for (const auto& [fn, line] : serialized)
    for (auto& [name, usage] : out)
      if (name == fn) {
        usage.wgmma_serialized = true;
        usage.raw += line + "\n";
      }
  return out;
}

ResourceUsage resource_usage(const std::string& log, const std::string& entry) {
  for (auto& [name, usage] : parse_resource_usage(log))
    if (entry.empty() || name == entry) return usage;
  return {};
}

} // namespace tp::rt
