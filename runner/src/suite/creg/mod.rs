//! The CREG evaluation-v1.0 suite: records, normative specification and model,
//! generator, independent checker, and the frozen file.
