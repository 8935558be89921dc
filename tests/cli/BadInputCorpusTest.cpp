// The bad-input corpus (bad_inputs.txt beside this file): every case is one CLI invocation or
// pilot spec that must be refused with its exit status and a message that says what is wrong,
// never a raw exception, a crash, a hang or a silently accepted default. The file's header
// describes its format; the cases run concurrently, each under a time limit.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <thread>

#include "RunCli.h"
#include "release/Files.h"

namespace tp::testing {
namespace {

namespace fs = std::filesystem;

struct Case {
  int line = 0;
  int rc = 0;
  std::string expect, args;
};

struct Corpus {
  std::vector<Case> cases;
  std::map<std::string, std::string> files; // @file NAME = content
  std::string base_spec;                    // @base lines, joined
};

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char c = s[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

Corpus load_corpus() {
  Corpus c;
  std::ifstream in(std::string(TILEPILOT_TESTS_DIR) + "/cli/bad_inputs.txt");
  EXPECT_TRUE(in) << "cannot read tests/cli/bad_inputs.txt";
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("@base ", 0) == 0) {
      c.base_spec += line.substr(6) + "\n";
      continue;
    }
    if (line.rfind("@file ", 0) == 0) {
      auto eq = line.find(" = ");
      c.files[trim(line.substr(6, eq - 6))] = unescape(line.substr(eq + 3));
      continue;
    }
    auto a = line.find(" | "), b = line.find(" | ", a + 3);
    EXPECT_TRUE(a != std::string::npos && b != std::string::npos) << "line " << n << ": " << line;
    if (b == std::string::npos) continue;
    Case k;
    k.line = n;
    k.rc = std::stoi(line.substr(0, a));
    k.expect = unescape(trim(line.substr(a + 3, b - a - 3)));
    k.args = trim(line.substr(b + 3));
    c.cases.push_back(k);
  }
  return c;
}

/// The base spec with `edits` applied: "key: yaml" replaces or adds a top-level key, "-key"
/// removes it, "+text" appends raw text, "=text" replaces the whole spec; " ;; " separates.
std::string edit_spec(const std::string& base, const std::string& edits) {
  std::vector<std::pair<std::string, std::string>> top; // key -> full text of its entry
  std::stringstream ss(base);
  for (std::string l; std::getline(ss, l);) {
    if (!l.empty() && l[0] != ' ' && l[0] != '-' && l.find(':') != std::string::npos)
      top.emplace_back(l.substr(0, l.find(':')), l + "\n");
    else if (!top.empty())
      top.back().second += l + "\n";
  }
  std::string extra;
  size_t pos = 0;
  while (pos <= edits.size()) {
    size_t end = edits.find(" ;; ", pos);
    std::string e =
        unescape(edits.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    pos = end == std::string::npos ? edits.size() + 1 : end + 4;
    if (e.empty()) continue;
    if (e[0] == '=') return e.substr(1);
    if (e[0] == '+') {
      extra += e.substr(1) + "\n";
      continue;
    }
    if (e[0] == '-') {
      std::erase_if(top, [&](auto& kv) { return kv.first == e.substr(1); });
      continue;
    }
    std::string key = e.substr(0, e.find(':'));
    auto it = std::find_if(top.begin(), top.end(), [&](auto& kv) { return kv.first == key; });
    if (it != top.end())
      it->second = e + "\n";
    else
      top.emplace_back(key, e + "\n");
  }
  std::string out;
  for (const auto& [k, v] : top)
    out += v;
  return out + extra;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

/// Materializes a case in its own folder and returns the shell arguments.
std::string prepare(const Corpus& c, const Case& k, const fs::path& d) {
  fs::create_directories(d);
  std::string args = k.args;
  if (args.rfind("SPEC ", 0) == 0) {
    release::write_text((d / "spec.yaml").string(), edit_spec(c.base_spec, args.substr(5)));
    args = "pilot spec.yaml --out out --no-progress";
  }
  for (const auto& [name, content] : c.files)
    release::write_text((d / name).string(), content);
  if (args.find("{fifo}") != std::string::npos) {
    ::mkfifo((d / "fifo").c_str(), 0600);
    replace_all(args, "{fifo}", (d / "fifo").string());
  }
  replace_all(args, "{d}", d.string());
  return args;
}

TEST(BadInputCorpus, HasAtLeast300DistinctCases) {
  Corpus c = load_corpus();
  std::set<std::string> distinct;
  for (const auto& k : c.cases)
    EXPECT_TRUE(distinct.insert(k.args).second) << "line " << k.line << " repeats " << k.args;
  EXPECT_GE(distinct.size(), 300u);
}

TEST(BadInputCorpus, EveryCaseGetsItsExitStatusAndMessage) {
  Corpus c = load_corpus();
  fs::path root = fs::temp_directory_path() / "tilepilot-cli-corpus";
  fs::remove_all(root);
  std::vector<std::string> failures(c.cases.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < c.cases.size();) {
      const Case& k = c.cases[i];
      fs::path d = root / ("case-" + std::to_string(k.line));
      std::string args = prepare(c, k, d);
      // Each case in its own folder and caches; a hang is a failure (exit 124), not a stuck
      // suite.
      std::string env = "cd '" + d.string() + "' && TILEPILOT_CACHE_DIR='" + d.string() +
                        "/cache' TILEPILOT_TUNE_DB='" + d.string() + "/tune.db' timeout 60";
      CliResult r = run_cli(args, env);
      std::ostringstream why;
      if (r.rc != k.rc) why << "exit " << r.rc << ", expected " << k.rc << "; ";
      if (r.out.find(k.expect) == std::string::npos) why << "output lacks '" << k.expect << "'; ";
      for (const char* raw : {"json.exception", "filesystem error", "bad_alloc", "terminate called",
                              "Segmentation", "what():"})
        if (r.out.find(raw) != std::string::npos) why << "raw exception text '" << raw << "'; ";
      if (!why.str().empty())
        failures[i] = "line " + std::to_string(k.line) + ": tilepilot " + k.args + "\n  " +
                      why.str() + "\n  output: " + r.out.substr(0, 600);
    }
  };
  unsigned n = std::clamp(2 * std::thread::hardware_concurrency(), 2u, 8u);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n; ++t)
    pool.emplace_back(worker);
  for (auto& t : pool)
    t.join();
  int bad = 0;
  for (const auto& f : failures)
    if (!f.empty()) {
      ++bad;
      ADD_FAILURE() << f;
    }
  std::cout << c.cases.size() - bad << " of " << c.cases.size() << " bad inputs handled\n";
  fs::remove_all(root);
}

} // namespace
} // namespace tp::testing
