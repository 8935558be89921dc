// The readers the fuzz driver exercises, each with its seed inputs. A target's run() reads one
// input the way the CLI does: it returns when the input is accepted and throws tp::UserError
// when it is refused; anything else it throws or does is a bug.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "Mutate.h"

namespace tp::fuzz {

struct Seed {
  std::string text;
  bool valid = false; // must be accepted: a seed the reader refuses means a stale corpus
  std::string origin; // where it came from, for messages
};

struct Target {
  std::string name;
  std::vector<Seed> seeds;
  std::function<void(const std::string& input)> run;
  /// Makes one iteration's input; default: a mutant of a random seed (Mutate.h).
  std::function<std::string(Rng&)> next;
};

/// Every target; readers that need files write them under `scratch`.
std::vector<Target> reader_targets(const std::string& scratch);

/// Seeds from the bad-input corpus, tests/cli/bad_inputs.txt (its header gives the format):
/// every @file's contents, the @base spec, and the --shape, --config and --space arguments of
/// its cases.
struct Corpus {
  std::vector<std::string> files, shapes, configs, spaces;
  std::string base_spec;
};
const Corpus& bad_input_corpus();
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

// The readers of folders (FileTargets.cpp).
Target repro_target(const std::string& scratch);
Target release_target(const std::string& scratch);
Target tunedb_target(const std::string& scratch);

} // namespace tp::fuzz
