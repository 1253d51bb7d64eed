"""jaxwrite.evals"""
