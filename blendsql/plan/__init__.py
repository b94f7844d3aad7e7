"""blendsql.plan"""
