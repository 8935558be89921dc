// The pilot's model stage backend: the Llama prefill (models/llama) run with the piloted
// operator's current configs pinned and with its fallback, interleaved on the GPU.
#pragma once
#include "pilot/Backends.h"

namespace tp::pilot {

/// Fills Backends::model_run. The hook throws StageSkipped when there is no GPU, a user error
/// for a model path other than llama-prefill or a bad model config, and fails the stage when the
/// two runs' logits disagree.
void add_model_hook(Backends& b);

/// User error when the model section cannot run anywhere: an unknown path, or a setting that
/// the model rejects (layers: -1, an unknown key, ...). The spec parser calls it, so a bad
/// model section is an error before any stage runs, with or without a GPU.
void validate_model_spec(const ModelSpec& spec);

/// The config each model problem of the piloted operator runs with: the pilot's config for the
/// same problem when the model's shape was piloted, else the config of the nearest piloted
/// problem with the same dtype and options (closest sizes, on a log scale). A model problem
/// whose nearest piloted problem is in `framework_routed` is left out: it runs the fallback,
/// as dispatch would run it. `*notes` lists the problems that borrowed a config or were left out.
std::vector<std::pair<ops::Problem, ops::Config>>
model_pins(const std::vector<std::pair<std::string, ops::Problem>>& model_problems,
           const std::vector<std::pair<ops::Problem, ops::Config>>& piloted,
           const std::vector<ops::Problem>& framework_routed, std::vector<std::string>* notes);

} // namespace tp::pilot
