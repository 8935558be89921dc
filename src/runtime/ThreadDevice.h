// Which GPU a thread's driver calls go to. Every thread uses the process's selected device
// (TILEPILOT_DEVICE, else 0) unless a DeviceScope binds it to another one: then ensure_context()
// makes that device's primary context current on the thread, so buffers, module loads and
// launches made there land on that device. The tuner's per-device workers use this.
#pragma once

namespace tp::rt {

class DeviceScope {
public:
  /// Binds the calling thread to device `ordinal` until destruction (then the previous binding
  /// is back). The context is made current lazily, by the next ensure_context().
  explicit DeviceScope(int ordinal);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

private:
  int previous_;
};

/// The device ensure_context() uses on the calling thread.
int thread_device_ordinal();

} // namespace tp::rt
