#include "core/runtime/builtin_plugins.h"

#include "core/cpu/cpu_device.h"
#include "core/runtime/single_process_comm.h"

namespace titan {
namespace {

Plugin* CreateCpuDevice() { return static_cast<DevicePlugin*>(new CpuDevice()); }
Plugin* CreateSingleProcessComm() { return static_cast<CommPlugin*>(new SingleProcessComm()); }

constexpr PluginDescriptor kCpuDevice = {TITAN_ABI_VERSION,
                                         PluginKind<DevicePlugin>::kName,
                                         "cpu",
                                         "1.0.0",
                                         "host memory and CPU compute",
                                         &CreateCpuDevice,
                                         kKernelTableFingerprint};
constexpr PluginDescriptor kSingleProcessComm = {
    TITAN_ABI_VERSION,
    PluginKind<CommPlugin>::kName,
    "single",
    "1.0.0",
    "one rank: collectives are local copies, no MPI needed",
    &CreateSingleProcessComm,
    kKernelTableFingerprint};

}  // namespace

std::vector<const PluginDescriptor*> BuiltinPlugins() { return {&kCpuDevice, &kSingleProcessComm}; }

}  // namespace titan
