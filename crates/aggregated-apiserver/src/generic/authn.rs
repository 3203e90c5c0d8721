//! Delegated authentication: front-proxy client certificates (identity from the configured request headers),
//! bearer tokens through TokenReview, and client certificates of the cluster client CA.
