"""tilecost.train"""
