package revert

// OutcomeOf is outcome, for the tests.
var OutcomeOf = outcome
