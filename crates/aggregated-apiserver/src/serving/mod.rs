//! The serving certificate and the trust kube-apiserver places in it: the Secret `coder-k8s-apiserver-tls`
//! (created, validated, renewed in place and hot-reloaded) and the APIService `caBundle` controller.
