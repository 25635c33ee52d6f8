package algotest

// GCRA is the table for gcra.
var GCRA = []Vector{}
