// A user's program registering and dispatching its own operator through the C++ API, with no
// plug-in file: the example plug-in's operator (examples/plugin/SoftcapOp.cpp, compiled into
// this program) is taken from its entry point and registered with tp::ops::register_operator.
#include <cmath>
#include <cstdio>

#include <tilepilot/dispatch.h>
#include <tilepilot/plugin.h>

extern "C" void tilepilot_plugin_register(tp::ops::PluginRegistry& r);

int own_operator() {
  using namespace tp;
  ops::PluginRegistry r;
  tilepilot_plugin_register(r);
  for (const auto& op : r.operators())
    ops::register_operator(op, "the package test program");
  HostTensor x(bf16, {5, 300}), y(bf16, {5, 300});
  x.fill_random(3, -90, 90);
  y.poison();
  ops::Dispatcher d; // no release: the call takes the operator's host framework
  d.run("softcap", {&x, &y}, {{"cap", "30"}});
  for (int64_t i = 0; i < x.numel(); ++i) {
    double want = 30 * std::tanh(x.get(i) / 30);
    if (!(std::fabs(y.get(i) - want) <= 2e-2 + 2e-2 * std::fabs(want))) {
      std::printf("softcap: element %lld is %g, want %g\n", (long long)i, y.get(i), want);
      return 1;
    }
  }
  ops::OpCounters c = d.counters("softcap");
  if (c.fallbacks() != 1) return 1;
  std::printf("softcap: registered by the program, dispatched, 1500 elements correct\n");
  return 0;
}
