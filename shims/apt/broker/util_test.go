package broker_test

import "encoding/json"

var jsonMarshal = json.Marshal
