// The CLI's subcommands. Each file registers its commands on the app; a command's callback
// stores the process exit status in *rc: 0 success (check passed), 1 failed check, 2 bad input;
// main.cpp maps what a command throws: 2 bad input (device out of memory too), 3 bug, 4 GPU fault.
#pragma once
#include <CLI/CLI.hpp>

namespace tp::cli {

void add_info_commands(CLI::App& app, int* rc);  // env, ops
void add_show_command(CLI::App& app, int* rc);   // show
void add_check_command(CLI::App& app, int* rc);  // check
void add_bench_command(CLI::App& app, int* rc);  // bench
void add_tune_command(CLI::App& app, int* rc);   // tune
void add_pilot_commands(CLI::App& app, int* rc); // pilot, repro
void add_model_command(CLI::App& app, int* rc);  // model

} // namespace tp::cli
