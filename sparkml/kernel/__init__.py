"""KernelSVC: kernel feature maps (Nystroem landmarks, random Fourier features), the estimator and its model."""
