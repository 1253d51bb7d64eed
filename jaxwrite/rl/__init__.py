"""jaxwrite.rl"""
