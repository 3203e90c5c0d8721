//! Label and field selectors over JSON objects.
