"""tilecost.predict"""
