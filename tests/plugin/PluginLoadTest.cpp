// Loading plug-ins: a good one registers its operators once; a broken one (no entry point,
// another ABI or version, a taken or repeated name, a missing file) is refused with a message
// that names the file and the fix, and registers nothing.
#include <algorithm>
#include <gtest/gtest.h>

#include "tilepilot/plugin.h"

using namespace tp;

namespace {

std::string module(int kind) {
  return std::string(TILEPILOT_PLUGIN_MODULES_DIR) + "/libbad_plugin_" + std::to_string(kind) +
         ".so";
}

std::string load_error(const std::string& path) {
  try {
    ops::load_plugin(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool registered(const std::string& name) {
  for (const ops::Operator* op : ops::all_operators())
    if (op->name() == name) return true;
  return false;
}

} // namespace

TEST(PluginLoad, AGoodPluginRegistersItsOperatorOnce) {
  ops::load_plugin(module(6));
  ops::load_plugin(module(6)); // the same file again: a no-op, not a name clash
  EXPECT_TRUE(registered("plugin_test_good"));
  EXPECT_EQ(ops::operator_origin("plugin_test_good").find("libbad_plugin_6.so") !=
                std::string::npos,
            true);
  auto all = ops::all_operators();
  EXPECT_EQ(std::count_if(all.begin(), all.end(),
                          [](const ops::Operator* o) { return o->name() == "plugin_test_good"; }),
            1);
}

TEST(PluginLoad, NoEntryPointIsRefused) {
  std::string m = load_error(module(1));
  EXPECT_NE(m.find("libbad_plugin_1.so has no TilePilot entry point"), std::string::npos) << m;
  EXPECT_NE(m.find("TILEPILOT_PLUGIN"), std::string::npos) << m;
}

TEST(PluginLoad, AnotherAbiIsRefused) {
  std::string m = load_error(module(2));
  EXPECT_NE(m.find("built for plug-in ABI 999"), std::string::npos) << m;
  EXPECT_NE(m.find("rebuild the plug-in"), std::string::npos) << m;
}

TEST(PluginLoad, AnotherVersionIsRefused) {
  std::string m = load_error(module(3));
  EXPECT_NE(m.find("built against TilePilot 0.0.0-other"), std::string::npos) << m;
}

TEST(PluginLoad, ATakenNameRegistersNothing) {
  std::string m = load_error(module(4));
  EXPECT_NE(m.find("registers operator 'gemm', but that name is taken (built-in)"),
            std::string::npos)
      << m;
  // All or none: the plug-in's other operator was not registered either.
  EXPECT_FALSE(registered("plugin_test_fresh"));
  EXPECT_EQ(ops::operator_origin("gemm"), "built-in");
}

TEST(PluginLoad, TwoOperatorsOfOneNameAreRefused) {
  std::string m = load_error(module(5));
  EXPECT_NE(m.find("registers two operators named 'plugin_test_twice'"), std::string::npos) << m;
  EXPECT_FALSE(registered("plugin_test_twice"));
}

TEST(PluginLoad, AMissingFileSaysSo) {
  std::string m = load_error("/nonexistent/libnothing.so");
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  m = load_error(TILEPILOT_PLUGIN_MODULES_DIR);
  EXPECT_NE(m.find("is not a regular file"), std::string::npos) << m;
}

TEST(PluginLoad, RegisteringATakenNameFromAProgramIsRefused) {
  std::string m;
  try {
    ops::register_operator(std::shared_ptr<const ops::Operator>(&ops::find_operator("gemm"),
                                                                [](const ops::Operator*) {}),
                           "this test");
  } catch (const UserError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("two operators are named 'gemm'"), std::string::npos) << m;
}
