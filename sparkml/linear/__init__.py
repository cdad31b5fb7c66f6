"""The linear models: LogisticRegression, LinearSVC, LinearRegression, their objective in MLlib's
parametrization and the normal equations."""
