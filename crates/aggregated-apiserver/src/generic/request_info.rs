//! Parses a request path and method into what Kubernetes calls request info: resource or non-resource, verb,
//! namespace, resource, name, subresource.
