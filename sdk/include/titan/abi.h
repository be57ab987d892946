// The one number that versions the plugin ABI. Bump it whenever any type in sdk/include/titan
// changes layout or a virtual function is added, removed or reordered, which includes any change
// to the kernel table (titan/compute_kernels.inc).
#ifndef TITAN_ABI_H_
#define TITAN_ABI_H_

#define TITAN_ABI_VERSION 23

// The fingerprint of the kernel table this ABI version fixes (titan/kernel_table.h computes it
// and stops the build when the table no longer matches it).
#define TITAN_KERNEL_TABLE_FINGERPRINT 2868498335668935647ULL

// The descriptor symbol carries the ABI number in its name so the loader can read it from the
// ELF symbol table before any plugin code runs.
#define TITAN_PLUGIN_SECTION "titan"
#define TITAN_PLUGIN_SYMBOL_PREFIX "titan_plugin_abi_"

#endif  // TITAN_ABI_H_
