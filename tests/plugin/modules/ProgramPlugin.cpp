// A plug-in whose operator runs two kernels per call (tests/support/TwoPassRowSum.h), for
// ProgramPluginTest: every command reaches a plug-in's kernel program.
#include <tilepilot/plugin.h>

#include "TwoPassRowSum.h"

TILEPILOT_PLUGIN(registry) {
  registry.add(tp::test::make_two_pass_rowsum());
}
