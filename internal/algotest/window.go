package algotest

// SlidingWindow is the table for sliding_window.
var SlidingWindow = []Vector{}

// FixedWindow is the table for fixed_window.
var FixedWindow = []Vector{}
