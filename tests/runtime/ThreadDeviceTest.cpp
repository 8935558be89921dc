// rt::DeviceScope binds only the calling thread, nests, and restores the previous binding; the
// default is the process's selected device. No driver call is made, so this runs without a GPU.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/Driver.h"
#include "runtime/ThreadDevice.h"
#include "tilepilot/error.h"

using namespace tp;

TEST(DeviceScope, BindsTheCallingThreadOnlyAndRestoresOnExit) {
  const int selected = rt::selected_device_ordinal();
  EXPECT_EQ(rt::thread_device_ordinal(), selected);
  {
    rt::DeviceScope outer(3);
    EXPECT_EQ(rt::thread_device_ordinal(), 3);
    int other = -1;
    std::thread([&] { other = rt::thread_device_ordinal(); }).join();
    EXPECT_EQ(other, selected) << "another thread keeps the selected device";
    {
      rt::DeviceScope inner(5);
      EXPECT_EQ(rt::thread_device_ordinal(), 5);
    }
    EXPECT_EQ(rt::thread_device_ordinal(), 3);
  }
  EXPECT_EQ(rt::thread_device_ordinal(), selected);
}

TEST(DeviceScope, NegativeOrdinalIsAUserError) {
  try {
    rt::DeviceScope bad(-2);
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("device ordinal -2 is negative"), std::string::npos)
        << e.what();
  }
}
