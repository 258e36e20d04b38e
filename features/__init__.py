"""tilecost.features"""
