"""dream"""
