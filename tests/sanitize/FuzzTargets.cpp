// The text readers the fuzz driver exercises (pilot specs, --shape, --config, --space) and the
// seeds every target shares (the bad-input corpus). Folder readers are in FileTargets.cpp.
#include "FuzzTargets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "autotune/ConfigSpace.h"
#include "ops/Operator.h"
#include "pilot/Spec.h"
#include "tilepilot/error.h"

namespace tp::fuzz {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("reader_fuzz: cannot read seed " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("reader_fuzz: cannot write " + path);
}

namespace {

const std::string kTests = TILEPILOT_TESTS_DIR;
const std::string kRoot = kTests + "/..";

/// The corpus's escapes (\n, \t, \\, \xNN), as BadInputCorpusTest reads them.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    if (c == 'x' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
  }
  return out;
}

/// The shell word after `flag` in a case's arguments, quotes removed; "" when absent.
std::string word_after(const std::string& args, const std::string& flag) {
  size_t at = args.find(flag + " ");
  if (at == std::string::npos) return "";
  size_t b = at + flag.size() + 1;
  if (b < args.size() && (args[b] == '\'' || args[b] == '"')) {
    size_t e = args.find(args[b], b + 1);
    return args.substr(b + 1, e == std::string::npos ? std::string::npos : e - b - 1);
  }
  return args.substr(b, args.find(' ', b) - b);
}

std::vector<std::string> files_in(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ext) out.push_back(f.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

const DType kDtypes[] = {DType::bf16, DType::f16, DType::f32};

Target spec_target() {
  Target t{"spec", {}, nullptr, nullptr};
  for (const auto& f : files_in(kRoot + "/examples/pilots", ".yaml"))
    t.seeds.push_back({read_file(f), true, f});
  for (const auto& d : fs::directory_iterator(kRoot + "/docs/pilots"))
    if (fs::exists(d.path() / "release/spec.yaml"))
      t.seeds.push_back({read_file((d.path() / "release/spec.yaml").string()), true,
                         (d.path() / "release/spec.yaml").string()});
  t.seeds.push_back({bad_input_corpus().base_spec, true, "bad_inputs.txt @base"});
  for (const auto& f : bad_input_corpus().files)
    t.seeds.push_back({f, false, "bad_inputs.txt @file"});
  t.run = [](const std::string& text) { pilot::parse_spec(text, "fuzz.yaml"); };
  return t;
}

/// --shape: the text as `tilepilot check OP --shape` reads it, for every operator and dtype.
/// Accepted when some operator takes it.
Target shape_target() {
  Target t{"shape", {}, nullptr, nullptr};
  for (const ops::Operator* op : ops::all_operators()) {
    std::string s;
    for (const auto& [k, v] : op->example_shape())
      s += (s.empty() ? "" : ",") + k + "=" + v;
    if (!s.empty()) t.seeds.push_back({s, true, op->name() + " example_shape"});
  }
  for (const auto& s : bad_input_corpus().shapes)
    t.seeds.push_back({s, false, "bad_inputs.txt --shape"});
  t.run = [](const std::string& text) {
    auto kv = ops::parse_kv(text, "--shape");
    bool accepted = false;
    std::string refusal;
    for (const ops::Operator* op : ops::all_operators())
      for (DType dt : kDtypes) {
        try {
          ops::Problem p = op->parse(kv, dt);
          accepted = true;
          (void)p.shape_str();
        } catch (const UserError& e) {
          refusal = e.what();
        }
      }
    if (!accepted) throw UserError({}, refusal);
  };
  return t;
}

/// --config: parsed, then its knobs checked against every operator on every arch.
Target config_target() {
  Target t{"config", {}, nullptr, nullptr};
  for (const ops::Operator* op : ops::all_operators()) {
    try {
      ops::Problem p = op->parse(op->example_shape(), DType::bf16);
      for (const char* arch : {"sm_90a", "sm_80"})
        t.seeds.push_back({ops::config_str(op->default_config(p, arch)), true,
                           op->name() + " default_config " + arch});
    } catch (const UserError&) {} // no example shape: no seed from it
  }
  for (const auto& s : bad_input_corpus().configs)
    t.seeds.push_back({s, false, "bad_inputs.txt --config"});
  t.run = [](const std::string& text) {
    ops::Config c = ops::parse_config(text);
    for (const ops::Operator* op : ops::all_operators())
      for (const char* arch : {"cpu", "sm_80", "sm_90a"}) {
        try {
          ops::validate_knobs(*op, c, arch);
        } catch (const UserError&) {} // a knob another operator has: refused, as it must be
      }
  };
  return t;
}

/// --space: narrows every operator's knob space on every arch it is tuned for, then checks the
/// size of what is left, as `tilepilot tune --space` does before enumerating. Accepted when
/// some operator takes it.
Target space_target() {
  Target t{"space", {}, nullptr, nullptr};
  for (const ops::Operator* op : ops::all_operators())
    for (const char* arch : {"sm_90a", "sm_80"}) {
      std::string s;
      for (const ops::Knob& k : autotune::knob_space(*op, arch)) {
        s += (s.empty() ? "" : ",") + k.name + "=";
        for (size_t i = 0; i < k.values.size(); ++i)
          s += (i ? "|" : "") + std::to_string(k.values[i]);
      }
      if (!s.empty()) t.seeds.push_back({s, true, op->name() + " knob_space " + arch});
    }
  for (const auto& s : bad_input_corpus().spaces)
    t.seeds.push_back({s, false, "bad_inputs.txt --space"});
  t.run = [](const std::string& text) {
    bool accepted = false;
    std::string refusal;
    for (const ops::Operator* op : ops::all_operators())
      for (const char* arch : {"sm_90a", "sm_80"}) {
        try {
          autotune::check_space_size(
              autotune::restrict_space(autotune::knob_space(*op, arch), text));
          accepted = true;
        } catch (const UserError& e) {
          refusal = e.what();
        }
      }
    if (!accepted) throw UserError({}, refusal);
  };
  return t;
}

} // namespace

const Corpus& bad_input_corpus() {
  static const Corpus c = [] {
    Corpus c;
    std::istringstream in(read_file(kTests + "/cli/bad_inputs.txt"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("@file ", 0) == 0) {
        size_t eq = line.find(" = ");
        if (eq != std::string::npos) c.files.push_back(unescape(line.substr(eq + 3)));
      } else if (line.rfind("@base ", 0) == 0) {
        c.base_spec += line.substr(6) + "\n";
      } else if (!line.empty() && line[0] != '#') {
        if (auto s = word_after(line, "--shape"); !s.empty()) c.shapes.push_back(s);
        if (auto s = word_after(line, "--config"); !s.empty()) c.configs.push_back(s);
        if (auto s = word_after(line, "--space"); !s.empty()) c.spaces.push_back(s);
      }
    }
    return c;
  }();
  return c;
}

std::vector<Target> reader_targets(const std::string& scratch) {
  std::vector<Target> out;
  out.push_back(spec_target());
  out.push_back(repro_target(scratch));
  out.push_back(release_target(scratch));
  out.push_back(tunedb_target(scratch));
  out.push_back(shape_target());
  out.push_back(config_target());
  out.push_back(space_target());
  return out;
}

} // namespace tp::fuzz
