"""What every estimator and model of this library shares: the fit skeleton, Params, input checks,
persistence in MLlib's format, scoring, and the session kind."""
