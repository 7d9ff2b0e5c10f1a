"""costate: adjoint sensitivities of ODE and PDE simulations, from Python.

See docs/python.md. ``costate.plot`` draws costate's HDF5 output files.
"""
