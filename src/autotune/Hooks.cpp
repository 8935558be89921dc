// Measurement statistics and the process-wide registration of the backend's hook factory.
#include "autotune/Hooks.h"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace tp::autotune {

namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

HookFactory& registry() {
  static HookFactory factory;
  return factory;
}

} // namespace

double Measurement::median_ms() const {
  return ms.empty() ? NAN : quantile(ms, 0.5);
}

double Measurement::iqr_ms() const {
  return ms.size() < 4 ? 0.0 : quantile(ms, 0.75) - quantile(ms, 0.25);
}

std::string reason_text(const std::exception& e) {
  std::string s = e.what();
  size_t at = s.find("error: ");
  return at == std::string::npos ? s : s.substr(at + 7);
}

void set_default_hooks(HookFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry() = std::move(factory);
}

bool has_default_hooks() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return bool(registry());
}

std::optional<TuneHooks> default_hooks(const ops::Operator& op, const ops::Problem& problem,
                                       const std::string& arch) {
  HookFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    factory = registry();
  }
  if (!factory) return std::nullopt;
  return factory(op, problem, arch);
}

} // namespace tp::autotune
