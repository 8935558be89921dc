// reader_fuzz: deterministic mutation fuzzing of TilePilot's file and flag readers (pilot specs,
// reproducers, release folders, tuning entries, --shape, --config), built with ASan and UBSan by
// scripts/test-sanitize. The property, for every input: the reader accepts it or refuses it with
// a tp::UserError whose message is not a library's raw exception text; never another exception,
// a crash, a sanitizer report or a hang (a per-input time limit).
//
//   reader_fuzz --target NAME [--iterations N] [--seed S] [--time-limit SECONDS] [--scratch DIR]
//   reader_fuzz --target NAME --replay FILE      one input, as saved by a failing run
//
// Iteration i of seed S always makes the same input. On a failure the input is saved under the
// scratch folder and the command that replays it is printed; the exit status is 1.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>
#include <typeinfo>
#include <unistd.h>

#include "FuzzTargets.h"
#include "tilepilot/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace tp::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

// What is running now, for the death callback and the watchdog (which run outside the loop).
struct Current {
  std::string target, scratch;
  const char* phase = "iteration"; // or "seed": iteration is then the seed's index
  const std::string* input = nullptr;
  long iteration = -1;
  std::atomic<int64_t> started_ns{0}; // 0: no input running
} g_now;

std::string save_input(const char* why) {
  if (!g_now.input) return "";
  std::string path =
      g_now.scratch + "/failing-" + g_now.target + "-" + std::to_string(g_now.iteration) + ".input";
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(g_now.input->data(), 1, g_now.input->size(), f);
    std::fclose(f);
  }
  std::fprintf(stderr,
               "reader_fuzz: %s: %s on %s %ld; the input is saved in %s\n"
               "  replay it: reader_fuzz --target %s --replay %s\n",
               g_now.target.c_str(), why, g_now.phase, g_now.iteration, path.c_str(),
               g_now.target.c_str(), path.c_str());
  return path;
}

// A sanitizer report ends the process; this runs first and keeps the input.
void on_death() {
  save_input("a sanitizer report");
}
// Aborts (UBSan, failed asserts) and, without ASan, crashes are caught here. Not
// async-signal-safe, which is acceptable for a process that is about to die anyway.
void on_signal(int sig) {
  save_input(sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : "a fatal signal");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void watchdog(double limit_s) {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int64_t t0 = g_now.started_ns.load();
    if (t0 == 0) continue;
    double s = (Clock::now().time_since_epoch().count() - t0) * 1e-9;
    if (s > limit_s) {
      save_input(("a hang (over " + std::to_string(limit_s) + " s on one input)").c_str());
      std::_Exit(1);
    }
  }
}

/// A refusal's message must tell the user what is wrong, not leak a library's exception text.
bool raw_exception_text(const std::string& msg) {
  for (const char* raw : {"[json.exception.", "what():", "basic_string", "std::", "stoll", "stoi",
                          "bad_alloc", "yaml-cpp:"})
    if (msg.find(raw) != std::string::npos) return true;
  return msg.empty();
}

enum class Outcome { accepted, refused };
std::string g_last_refusal; // the last user error's message

/// One input through the target; exits the process (status 1) when the property fails.
Outcome run_one(const Target& t, const std::string& input, long iteration) {
  g_now.input = &input;
  g_now.iteration = iteration;
  g_now.started_ns = Clock::now().time_since_epoch().count();
  std::string bad;
  Outcome o = Outcome::accepted;
  try {
    t.run(input);
  } catch (const UserError& e) {
    o = Outcome::refused;
    g_last_refusal = e.what();
    if (raw_exception_text(e.what()))
      bad = std::string("a user error with raw exception text: ") + e.what();
  } catch (const std::exception& e) {
    bad =
        std::string("an exception other than a user error (") + typeid(e).name() + "): " + e.what();
  } catch (...) {
    bad = "an exception that is not a std::exception";
  }
  g_now.started_ns = 0;
  if (!bad.empty()) {
    save_input(bad.c_str());
    std::exit(1);
  }
  g_now.input = nullptr;
  return o;
}

struct Args {
  std::string target, replay, scratch = "/tmp/tilepilot-reader-fuzz";
  long iterations = 1000;
  uint64_t seed = 1;
  double time_limit_s = 10;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "reader_fuzz: " << why
            << "\nusage: reader_fuzz --target spec|repro|release|tunedb|shape|config"
               " [--iterations N] [--seed S] [--time-limit SECONDS] [--scratch DIR]"
               " [--replay FILE]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 == argc) usage(k + " needs a value");
    std::string v = argv[++i];
    try {
      if (k == "--target")
        a.target = v;
      else if (k == "--replay")
        a.replay = v;
      else if (k == "--scratch")
        a.scratch = v;
      else if (k == "--iterations")
        a.iterations = std::stol(v);
      else if (k == "--seed")
        a.seed = std::stoull(v);
      else if (k == "--time-limit")
        a.time_limit_s = std::stod(v);
      else
        usage("unknown option " + k);
    } catch (const std::logic_error&) {
      usage(k + " " + v + " is not a number");
    }
  }
  if (a.target.empty()) usage("--target is required");
  return a;
}

int fuzz(const Args& a) {
  std::filesystem::create_directories(a.scratch);
  g_now.scratch = std::filesystem::absolute(a.scratch).string();
  g_now.target = a.target;
  std::thread(watchdog, a.time_limit_s).detach();
  std::vector<Target> targets = reader_targets(g_now.scratch);
  const Target* t = nullptr;
  for (const auto& x : targets)
    if (x.name == a.target) t = &x;
  if (!t) usage("unknown target " + a.target);
  if (!a.replay.empty()) {
    std::string input = read_file(a.replay);
    bool ok = run_one(*t, input, -1) == Outcome::accepted;
    std::cout << "reader_fuzz: " << t->name << ": " << (ok ? "accepted" : "refused") << "\n";
    return 0;
  }
  auto start = Clock::now();
  // Seeds first: a valid seed that is refused means the corpus no longer exercises the
  // reader's accepting paths, which would make the fuzzing below pointless.
  std::vector<std::string> texts;
  size_t valid = 0;
  for (size_t i = 0; i < t->seeds.size(); ++i) {
    const Seed& s = t->seeds[i];
    texts.push_back(s.text);
    valid += s.valid;
    g_now.phase = "seed";
    if (run_one(*t, s.text, static_cast<long>(i)) == Outcome::refused && s.valid) {
      std::cerr << "reader_fuzz: " << t->name << ": the valid seed " << s.origin << " is refused ("
                << g_last_refusal << "); fix the seed or the reader\n";
      return 1;
    }
  }
  if (valid == 0) {
    std::cerr << "reader_fuzz: " << t->name << " has no valid seed\n";
    return 1;
  }
  g_now.phase = "iteration";
  long accepted = 0;
  for (long i = 0; i < a.iterations; ++i) {
    // One generator per iteration, so that iteration i replays without the ones before it.
    Rng rng(a.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
    std::string input = t->next ? t->next(rng) : mutate(texts[rng() % texts.size()], texts, rng);
    accepted += run_one(*t, input, i) == Outcome::accepted;
  }
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("reader_fuzz: %s: %zu seeds (%zu valid) and %ld mutants (%ld accepted, %ld "
              "refused) in %.1f s: no crash, hang, sanitizer report or stray exception\n",
              t->name.c_str(), t->seeds.size(), valid, a.iterations, accepted,
              a.iterations - accepted, s);
  return 0;
}

} // namespace
} // namespace tp::fuzz

int main(int argc, char** argv) {
  // UBSan's runtime is not ASan's and does not run ASan's death callback: with
  // UBSAN_OPTIONS=abort_on_error=1 (set by the tests) its reports end in SIGABRT instead.
  std::signal(SIGABRT, tp::fuzz::on_signal);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(tp::fuzz::on_death);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    std::signal(sig, tp::fuzz::on_signal);
#endif
  return tp::fuzz::fuzz(tp::fuzz::parse_args(argc, argv));
}
