// The one number that versions the plugin ABI. Bump it whenever any type in sdk/include/titan
// changes layout or a virtual function is added, removed or reordered.
#ifndef TITAN_ABI_H_
#define TITAN_ABI_H_

#define TITAN_ABI_VERSION 14

// The descriptor symbol carries the ABI number in its name so the loader can read it from the
// ELF symbol table before any plugin code runs.
#define TITAN_PLUGIN_SECTION "titan"
#define TITAN_PLUGIN_SYMBOL_PREFIX "titan_plugin_abi_"

#endif  // TITAN_ABI_H_
