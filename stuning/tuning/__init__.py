"""The tuner: problem features, device specs, cost models, search strategies, timing."""
