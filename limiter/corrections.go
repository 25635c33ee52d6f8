package limiter

import (
	"context"

	"github.com/sluice-rl/sluice/limit"
)

// The kinds of correction Config.OnCorrection hears: what was spent,
// corrected once more was known. A correction is no decision: it admits
// nothing, and is counted apart from the decisions.
const (
	CorrectionSpend          = "spend"               // RL.ADJUST delta >= 0: tokens spent without a check
	CorrectionGiveBack       = "give_back"           // RL.ADJUST delta < 0 with its receipt, given back
	CorrectionGiveBackFailed = "give_back_unapplied" // a give-back the store could not answer: nothing given back (decided_by the failure mode)
	CorrectionRefund         = "mtake_refund"        // a take of a refused RL.MTAKE given back
	CorrectionRefundFailed   = "mtake_refund_failed" // a refund the store could not make (tokens lost, never over-admitted)
	CorrectionRelease        = "release"             // RL.RELEASE freed a held slot
	CorrectionReleaseUnknown = "release_unknown"     // RL.RELEASE named an unknown or expired token
)

// corrected reports one correction under p to the OnCorrection hook.
func (l *Limiter) corrected(ctx context.Context, p *limit.Policy, kind, decidedBy string, tokens int64) {
	if l.onCorrection != nil {
		l.onCorrection(limit.FrontOf(ctx), p, kind, decidedBy, tokens)
	}
}
