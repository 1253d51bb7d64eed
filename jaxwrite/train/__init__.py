"""jaxwrite.train"""
