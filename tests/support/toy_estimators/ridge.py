"""ToyRidge: LinearRegression restricted to an L2 penalty, with a model class of its own."""

from sparkml.linear.linear_regression import LinearRegression, LinearRegressionModel


class ToyRidgeModel(LinearRegressionModel):
    """A fitted ToyRidge (LinearRegressionModel's files, under this class's name)."""

    _java_class = "support.toy_estimators.ToyRidgeModel"


class ToyRidge(LinearRegression):
    """min (1/2W) sum_i w_i (x_i . beta + b - y_i)^2 + regParam / 2 ||beta||^2: elasticNetParam must stay 0."""

    def _problem(self, summary):
        if self.getElasticNetParam() != 0:
            raise ValueError(f"ToyRidge: elasticNetParam must be 0; got {self.getElasticNetParam()}")
        return super()._problem(summary)

    def _model(self, beta, b, problem, scale=1.0):
        fitted = super()._model(beta, b, problem, scale)
        return ToyRidgeModel(fitted.coefficients, fitted.intercept, scale)
