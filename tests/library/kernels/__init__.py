"""Tests of onlinegp.kernels: the Attentive Kernel, its compiled routine, the length-scale defaults."""
