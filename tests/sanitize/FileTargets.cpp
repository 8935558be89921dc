// The folder readers the fuzz driver exercises: a reproducer's repro.json, a release folder and
// a tuning database entry. Their input is one file's contents after a short header naming the
// seed it belongs to, so that the input alone replays the run (reader_fuzz --replay).
#include <filesystem>
#include <sstream>

#include "FuzzTargets.h"
#include "autotune/TuningDb.h"
#include "ops/Check.h"
#include "pilot/FaultyOperator.h"
#include "pilot/Repro.h"
#include "release/Files.h"
#include "release/ReleaseManifest.h"
#include "tilepilot/error.h"

namespace tp::fuzz {

namespace fs = std::filesystem;

namespace {

const std::string kRoot = std::string(TILEPILOT_TESTS_DIR) + "/..";

/// Every operator's example problem (operators without one are left out).
std::vector<ops::Problem> example_problems() {
  std::vector<ops::Problem> out;
  for (const ops::Operator* op : ops::all_operators())
    if (!op->example_shape().empty()) out.push_back(op->parse(op->example_shape(), DType::bf16));
  return out;
}

/// "HEADER\n" + body: the input format of the folder targets.
std::pair<std::string, std::string> split_header(const std::string& input, int lines) {
  size_t at = 0;
  for (int i = 0; i < lines; ++i) {
    at = input.find('\n', at);
    if (at == std::string::npos) throw std::runtime_error("reader_fuzz: input has no header");
    ++at;
  }
  return {input.substr(0, at), input.substr(at)};
}

} // namespace

Target repro_target(const std::string& scratch) {
  Target t{"repro", {}, nullptr, nullptr};
  const std::string dir = scratch + "/repro";
  fs::create_directories(dir);
  for (const ops::Problem& p : example_problems()) {
    const ops::Operator& op = ops::find_operator(p.op);
    pilot::ReproCase c;
    c.problem = p;
    c.config = op.default_config(p, "sm_90a");
    c.seed = 7;
    c.atol = c.rtol = 2e-2;
    ops::CheckResult r;
    r.op = p.op;
    r.problem = p;
    r.backend = "cpu";
    r.config = c.config;
    r.seed = 7;
    r.checked = 64, r.bad = 1, r.blocks_run = 1, r.blocks_total = 4;
    r.max_abs_err = 0.5, r.atol = r.rtol = 2e-2;
    r.first_bad = "out[0, 1]: got 1.5, want 1";
    nlohmann::json j = {{"format", "tilepilot-repro/1"},
                        {"case", pilot::to_json(c)},
                        {"failure", ops::to_json(r)},
                        {"shrink", nlohmann::json::object()},
                        {"command", "tilepilot repro " + dir}};
    t.seeds.push_back({j.dump(2), true, p.op + " example problem"});
  }
  for (const auto& f : bad_input_corpus().files)
    t.seeds.push_back({f, false, "bad_inputs.txt @file"});
  // What `tilepilot repro` does before it runs anything: read the file, find the operator and
  // its fault, check the config for the recorded arch.
  t.run = [dir](const std::string& text) {
    write_file(dir + "/repro.json", text);
    pilot::ReproFile f = pilot::read_repro(dir);
    auto op = pilot::with_fault(ops::find_operator(f.c.problem.op), f.c.fault);
    ops::check_config(*op, f.c.problem, f.c.config, f.c.arch);
  };
  return t;
}

namespace {

// The release files a reader parses (the kernels are only hashed).
const char* const kReleaseTexts[] = {"manifest.json", "pinned.json", "test_matrix.json",
                                     "fallback.json", "spec.yaml"};

struct ReleaseSeed {
  std::string dir;    // the working copy under scratch
  bool loads = false; // a folder in docs/ that is not a complete release seeds refusals only
  std::map<std::string, std::string> texts;
  nlohmann::json manifest;
};

} // namespace

Target release_target(const std::string& scratch) {
  Target t{"release", {}, nullptr, nullptr};
  auto seeds = std::make_shared<std::vector<ReleaseSeed>>();
  std::vector<std::string> all_texts;
  for (const auto& d : fs::directory_iterator(kRoot + "/docs/pilots")) {
    if (!fs::exists(d.path() / "release/manifest.json")) continue;
    ReleaseSeed s;
    s.dir = scratch + "/release-" + d.path().filename().string();
    fs::remove_all(s.dir);
    fs::create_directories(s.dir);
    fs::copy(d.path() / "release", s.dir, fs::copy_options::recursive);
    for (const char* f : kReleaseTexts)
      if (fs::exists(s.dir + "/" + f)) s.texts[f] = read_file(s.dir + "/" + f);
    s.manifest = nlohmann::json::parse(s.texts.at("manifest.json"));
    try {
      release::load_release(s.dir);
      s.loads = true;
    } catch (const UserError&) {}
    for (const auto& [f, text] : s.texts)
      all_texts.push_back(text);
    seeds->push_back(std::move(s));
  }
  std::sort(seeds->begin(), seeds->end(), [](auto& a, auto& b) { return a.dir < b.dir; });
  // Header: seed index, file, and whether the manifest's hashes are rewritten to match the
  // mutated file (else nearly every mutant stops at the hash check, before the JSON is read).
  auto encode = [](size_t k, const std::string& file, bool rehash, const std::string& text) {
    return std::to_string(k) + "\n" + file + "\n" + (rehash ? "rehash" : "keep") + "\n" + text;
  };
  for (size_t k = 0; k < seeds->size(); ++k)
    for (const auto& [f, text] : (*seeds)[k].texts)
      t.seeds.push_back({encode(k, f, false, text), (*seeds)[k].loads, (*seeds)[k].dir + "/" + f});
  t.next = [seeds, all_texts, encode](Rng& rng) {
    size_t k = rng() % seeds->size();
    const ReleaseSeed& s = (*seeds)[k];
    auto it = std::next(s.texts.begin(), static_cast<long>(rng() % s.texts.size()));
    bool rehash = it->first != "manifest.json" && rng() % 4 != 0;
    return encode(k, it->first, rehash, mutate(it->second, all_texts, rng));
  };
  t.run = [seeds](const std::string& input) {
    auto [header, text] = split_header(input, 3);
    std::istringstream h(header);
    size_t k;
    std::string file, mode;
    h >> k >> file >> mode;
    const ReleaseSeed& s = seeds->at(k);
    struct Restore { // the working copy goes back to the seed whatever the reader does
      const ReleaseSeed& s;
      std::string file;
      ~Restore() {
        write_file(s.dir + "/" + file, s.texts.at(file));
        write_file(s.dir + "/manifest.json", s.texts.at("manifest.json"));
      }
    } restore{s, file};
    write_file(s.dir + "/" + file, text);
    if (mode == "rehash") {
      nlohmann::json m = s.manifest;
      m["files"][file]["xxh64"] = release::xxh64_hex(text);
      m["files_xxh64"] = release::file_list_hash(m["files"]);
      write_file(s.dir + "/manifest.json", m.dump(2) + "\n");
    }
    release::Release r = release::load_release(s.dir);
    // What dispatch asks of a release it has read.
    std::string why;
    for (const auto& m : r.matrix)
      (void)r.find(m.device, m.problem, &why);
  };
  return t;
}

Target tunedb_target(const std::string& scratch) {
  Target t{"tunedb", {}, nullptr, nullptr};
  const std::string dir = scratch + "/tunedb";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto keys = std::make_shared<std::vector<autotune::TuneKey>>();
  rt::DeviceInfo d;
  d.name = "NVIDIA H200", d.arch = "sm_90a", d.sm_count = 132, d.driver_version = "13.0";
  autotune::TuningDb db(dir);
  for (const ops::Problem& p : example_problems()) {
    autotune::DbEntry e;
    e.key = autotune::make_key(p, d);
    e.config = ops::find_operator(p.op).default_config(p, "sm_90a");
    e.ms_median = 0.1, e.default_ms_median = 0.12, e.source = "reader_fuzz";
    db.put(e);
    std::string text = read_file(db.path_for(e.key));
    fs::remove(db.path_for(e.key));
    t.seeds.push_back({std::to_string(keys->size()) + "\n" + text, true, p.op + " entry"});
    keys->push_back(e.key);
  }
  auto bodies = std::make_shared<std::vector<std::string>>();
  for (const Seed& s : t.seeds)
    bodies->push_back(split_header(s.text, 1).second);
  t.next = [bodies](Rng& rng) {
    size_t k = rng() % bodies->size();
    return std::to_string(k) + "\n" + mutate((*bodies)[k], *bodies, rng);
  };
  // The database ignores an entry it cannot read (and says so once): for the fuzzer that is
  // the reader refusing it.
  t.run = [dir, keys](const std::string& input) {
    auto [header, text] = split_header(input, 1);
    const autotune::TuneKey& key = keys->at(std::stoul(header));
    std::string ignored;
    autotune::TuningDb db(dir, [&](const std::string& m) { ignored = m; });
    write_file(db.path_for(key), text);
    std::optional<autotune::DbEntry> got = db.get(key);
    std::vector<autotune::DbEntry> all = db.list();
    fs::remove(db.path_for(key));
    if (!got) throw UserError({}, ignored.empty() ? "entry ignored" : ignored);
    if (all.size() != 1) throw std::runtime_error("get() returned the entry but list() did not");
  };
  return t;
}

} // namespace tp::fuzz
