// libcurl, loaded when a run first talks to etcd (fault_tolerance.etcd_endpoints): titan-run does
// not link it, so a run without etcd (and the GPU bundle) needs neither it nor the libraries it
// pulls in (Kerberos, LDAP, SSH, ...).
#ifndef TITAN_CORE_FAULT_TOLERANCE_CURL_LIBRARY_H_
#define TITAN_CORE_FAULT_TOLERANCE_CURL_LIBRARY_H_

#include <curl/curl.h>

#include "absl/status/statusor.h"

namespace titan {

// The functions of libcurl's easy interface that the etcd store calls.
struct CurlLibrary {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL* handle);
  void (*easy_reset)(CURL* handle);
  CURLcode (*easy_setopt)(CURL* handle, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* handle);
  CURLcode (*easy_getinfo)(CURL* handle, CURLINFO info, ...);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* text);
  void (*slist_free_all)(curl_slist* list);
};

// libcurl.so.4 loaded and initialised once; an error naming it (and the package that has it)
// when it is missing or lacks a function.
absl::StatusOr<const CurlLibrary*> Curl();

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_CURL_LIBRARY_H_
