package ddbcost

// On-demand prices of DynamoDB Standard tables in us-east-1, in dollars per
// million request units, as they are since the cut of November 2024
// (https://aws.amazon.com/dynamodb/pricing/on-demand/). Other regions cost
// more; a table class of Standard-IA costs more per request.
const (
	PricePerMillionWriteUnits = 0.625
	PricePerMillionReadUnits  = 0.125
)

// SecondsPerMonth is the month Monthly prices: 30 days.
const SecondsPerMonth = 30 * 24 * 3600

// Monthly is what steady rates of write and read request units a second
// cost in a month (30 days) on demand, in dollars.
func Monthly(writeUnitsPerSec, readUnitsPerSec float64) float64 {
	perSec := writeUnitsPerSec*PricePerMillionWriteUnits + readUnitsPerSec*PricePerMillionReadUnits
	return perSec * SecondsPerMonth / 1e6
}
