// Deliberately broken plug-ins for PluginLoadTest, one per BAD_KIND: each must be refused with
// a message naming the file and the fix, and leave the registry as it was.
#include <tilepilot/plugin.h>

#if BAD_KIND == 1 // no entry points at all
extern "C" __attribute__((visibility("default"))) int not_a_tilepilot_plugin() {
  return 0;
}
#elif BAD_KIND == 2 // built for another plug-in ABI
extern "C" __attribute__((visibility("default"))) int tilepilot_plugin_abi() {
  return 999;
}
extern "C" __attribute__((visibility("default"))) const char* tilepilot_plugin_version() {
  return TILEPILOT_VERSION;
}
extern "C" __attribute__((visibility("default"))) void
tilepilot_plugin_register(tp::ops::PluginRegistry&) {}
#elif BAD_KIND == 3 // built against another TilePilot version
extern "C" __attribute__((visibility("default"))) int tilepilot_plugin_abi() {
  return TILEPILOT_PLUGIN_ABI;
}
extern "C" __attribute__((visibility("default"))) const char* tilepilot_plugin_version() {
  return "0.0.0-other";
}
extern "C" __attribute__((visibility("default"))) void
tilepilot_plugin_register(tp::ops::PluginRegistry&) {}
#elif BAD_KIND == 4 || BAD_KIND == 5 || BAD_KIND == 6
// 4: an operator named like a built-in; 5: two operators of one name; 6: a good one.
namespace {
class Named : public tp::ops::Operator {
public:
  explicit Named(std::string n) : name_(std::move(n)) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return "test operator"; }
  std::vector<std::pair<std::string, std::string>> shape_keys() const override { return {}; }
  tp::ops::Problem parse(const std::map<std::string, std::string>&, tp::DType d) const override {
    tp::ops::Problem p;
    p.op = name_;
    p.dtype = d;
    return p;
  }
  std::vector<tp::ops::Knob> knobs(const std::string&) const override { return {}; }
  tp::ops::Config default_config(const tp::ops::Problem&, const std::string&) const override {
    return {};
  }
  void validate(const tp::ops::Problem&, const tp::ops::Config&) const override {}
  tp::Kernel build(const tp::ops::Problem&, const tp::ops::Config&) const override {
    tp::user_error() << name_ << " builds nothing";
    return {};
  }
  std::vector<tp::ops::ArgSpec> arg_specs(const tp::ops::Problem&) const override { return {}; }
  std::vector<int> outputs(const tp::ops::Problem&) const override { return {}; }
  std::vector<tp::ops::Box> block_outputs(const tp::ops::Problem&, const tp::ops::Config&,
                                          const std::array<int64_t, 3>&) const override {
    return {};
  }
  double flops(const tp::ops::Problem&) const override { return 0; }
  double min_bytes(const tp::ops::Problem&) const override { return 0; }
  std::vector<double> reference(const tp::ops::Problem&, const std::vector<tp::HostTensor>&,
                                const tp::ops::Box&) const override {
    return {};
  }
  std::string framework_name() const override { return "none"; }
  std::unique_ptr<tp::ops::Framework> framework(const tp::ops::Problem&,
                                                const tp::ops::FrameworkOptions&) const override {
    tp::user_error() << name_ << " has no framework operator";
    return nullptr;
  }

private:
  std::string name_;
};
} // namespace

TILEPILOT_PLUGIN(registry) {
#if BAD_KIND == 4
  registry.add(std::make_shared<Named>("plugin_test_fresh"));
  registry.add(std::make_shared<Named>("gemm"));
#elif BAD_KIND == 5
  registry.add(std::make_shared<Named>("plugin_test_twice"));
  registry.add(std::make_shared<Named>("plugin_test_twice"));
#else
  registry.add(std::make_shared<Named>("plugin_test_good"));
#endif
}
#endif
